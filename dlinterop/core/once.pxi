# Provides: one-time set-ups that hold no lock while they run Python code, and are decided
# again in a child made by fork() while one was running (_decided, _register_setup); the
# modules they are decided on, once those have run (_module_if_run).
# Uses: runtime.pxi (atomics).

# One-time set-ups (the CUDA module, PyTorch's bit readers, the NumPy routes) hold no lock
# while they run Python code, which may call dlinterop again (a PyTorch mode, another
# thread) or be cut short by fork(): a state goes UNDECIDED -> DECIDING (claimed by one
# thread with a compare-and-swap) -> its answer; whoever finds it DECIDING takes the
# general route meanwhile. In a child made by fork() while a set-up was DECIDING, the
# thread running it is gone: the child puts it back to UNDECIDED (pthread_atfork).
cdef extern from "once.h":
    Py_ssize_t SETUP_UNDECIDED "DLI_SETUP_UNDECIDED"
    Py_ssize_t SETUP_DECIDING "DLI_SETUP_DECIDING"
    bint setup_claim "dli_setup_claim" (Py_ssize_t* state) noexcept nogil
    int setup_register "dli_setup_register" (Py_ssize_t* state) noexcept


cdef dict _setup_states = {}   # name -> the address of its state, for the testing aid


cdef int _register_setup(str name, Py_ssize_t* state) except -1:
    if setup_register(state) != 0:
        raise RuntimeError("dlinterop: cannot register a one-time set-up for fork()")
    _setup_states[name] = <uintptr_t>state
    return 0


def _setup_state(str name, state=None):
    """Testing aid: a one-time set-up's state ("cuda", "torch", "numpy_route",
    "numpy_handback"): "undecided", "deciding", or its answer (an int); with `state`
    ("undecided" or "deciding"), sets it first, as a thread that is deciding it would."""
    cdef Py_ssize_t* address = <Py_ssize_t*><uintptr_t>_setup_states[name]
    if state is not None:
        address[0] = {"undecided": SETUP_UNDECIDED, "deciding": SETUP_DECIDING}[state]
    if address[0] == SETUP_UNDECIDED:
        return "undecided"
    if address[0] == SETUP_DECIDING:
        return "deciding"
    return address[0]


ctypedef Py_ssize_t (*_SetUp)(object) except -4


cdef Py_ssize_t _decided(Py_ssize_t* state, _SetUp set_up, object argument) except -4:
    """The answer of a one-time set-up (what set_up returned: >= -1, or SETUP_UNDECIDED to
    be asked again later), running it in this thread if nobody has; SETUP_DECIDING while
    another call (in this thread or another) is running it."""
    cdef Py_ssize_t answer = dli_atomic_load(state)
    if answer == SETUP_UNDECIDED and setup_claim(state):
        try:
            answer = set_up(argument)
        except BaseException:
            dli_atomic_store(state, SETUP_UNDECIDED)
            raise
        dli_atomic_store(state, answer)
    return answer


cdef object _module_if_run(str name):
    """sys.modules[name] once it has finished running, else None. Never raises. The import
    machinery puts a module in sys.modules before it runs it, marked meanwhile (importlib
    reads `__spec__._initializing`, as here): while another thread imports NumPy or
    PyTorch, their modules are there half made, and a set-up decided on one would be
    decided wrong for good."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module
