# Provides: whether a Tensor placed on a device as copy= asks takes a copy (_copy_needed):
# the rule of placement that export's dl_device= and copy= apply, beside placement.pxi's.
# Uses: placement.pxi (_refuse_copy).


cdef inline bint _copy_needed(Tensor t, DLDevice target, object copy) except -1:
    """Whether t, placed on `target` as copy= (checked) asks, is a copy: where t lives
    elsewhere, or copy=True; CopyError where copy=False forbids the copy the move takes.
    The copy, and whether dlinterop can reach `target`, are the caller's."""
    if same_device(target, t.dl.device):
        return copy is True
    if copy is False:
        _refuse_copy(t.dl.device, target)
    return True
