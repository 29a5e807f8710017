# dlinterop._capi has no Python-level names: it exists for its C API (dlinterop/_capi_api.h
# under dl.get_include()), which C extensions import with import_dlinterop___capi().
