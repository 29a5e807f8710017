# Provides: dl.publish_exchange_api and dl.unpublish_exchange_api, which put a table of
# dl.exchange_api_for (NumPy's, JAX's, pyarrow's, Warp's) on its framework's type as
# __dlpack_c_exchange_api__, for consumers that look tables up there, and take it back.
# Uses: runtime.pxi, exchange_tables.pxi.

cdef extern from *:
    """
    /* The dict a type keeps its attributes in, as a new reference: PyType_GetDict where
       CPython has it (3.12: the dict of a static type may live elsewhere), else tp_dict. */
    static PyObject* dli_type_dict(PyTypeObject* type) {
    #if PY_VERSION_HEX >= 0x030C0000
      return PyType_GetDict(type);
    #else
      Py_XINCREF(type->tp_dict);
      return type->tp_dict;
    #endif
    }
    """
    object dli_type_dict(PyTypeObject* type)

cdef str _PUBLISHED = "__dlpack_c_exchange_api__"


cdef object _native_table_for(type cls):
    """The table dlinterop would publish on cls, or ValueError saying why none."""
    if cls is Tensor:
        raise ValueError("dl.Tensor publishes its own exchange table already")
    table = exchange_api_for(cls)
    if table is _generic_table:
        raise ValueError(
            f"dlinterop has no native exchange table for {cls.__module__}.{cls.__qualname__}: "
            "its generic table calls __dlpack__, which a consumer does without a table; "
            "publishing it would only slow consumers down")
    return table


def publish_exchange_api(cls):
    """Puts ``dl.exchange_api_for(cls)`` on the type ``cls`` as its
    ``__dlpack_c_exchange_api__``, where consumers that look a DLPack 1.3 exchange table up
    on a type (tvm-ffi, cuda.core, dlinterop itself) find it: they then take that type's
    objects through the table, with no ``__dlpack__`` call. Only where dlinterop has a
    native table: ``numpy.ndarray``, ``jax.Array``, pyarrow's ``Array`` and ``Tensor``,
    Warp's ``array`` (their subclasses inherit it); PyTorch has one of its own.

    This changes another library's type, for the whole process and every consumer: it is
    never done on import; ``dl.unpublish_exchange_api(cls)`` undoes it. Immutable types
    (NumPy's) are changed through their attribute dict. Raises TypeError for what is no
    type, ValueError for a type that has a table of its own (PyTorch's, dl.Tensor) or for
    which dlinterop has no native table. Publishing twice is harmless."""
    if not isinstance(cls, type):
        raise TypeError(f"publish_exchange_api takes a type, got {type(cls).__name__}")
    table = _native_table_for(<type>cls)
    current = getattr(cls, _PUBLISHED, None)
    if current is table:
        return
    if current is not None:
        raise ValueError(f"{cls.__module__}.{cls.__qualname__} has an exchange table of its "
                         "own (__dlpack_c_exchange_api__): dlinterop does not replace it")
    try:
        setattr(cls, _PUBLISHED, table)
    except TypeError:       # an immutable type: through its dict, then its caches dropped
        dli_type_dict(<PyTypeObject*>cls)[_PUBLISHED] = table
        PyType_Modified(<PyTypeObject*>cls)


def unpublish_exchange_api(cls):
    """Takes back what ``dl.publish_exchange_api(cls)`` put on ``cls``. Raises ValueError
    when ``cls`` holds no table dlinterop published (none, one of its own, or one that its
    base class holds)."""
    if not isinstance(cls, type):
        raise TypeError(f"unpublish_exchange_api takes a type, got {type(cls).__name__}")
    attributes = dli_type_dict(<PyTypeObject*>cls)
    current = attributes.get(_PUBLISHED)
    if current is None or current is not exchange_api_for(cls):
        raise ValueError(f"{cls.__module__}.{cls.__qualname__} holds no exchange table that "
                         "dl.publish_exchange_api put there")
    try:
        delattr(cls, _PUBLISHED)
    except TypeError:
        del attributes[_PUBLISHED]
        PyType_Modified(<PyTypeObject*>cls)
