"""Tests of .ci/check_abi.py on edited copies of the real header (python -m pytest
.ci/test_check_abi.py)."""

import importlib.util
import os
import re

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("check_abi", os.path.join(_here, "check_abi.py"))
check_abi = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_abi)

ROOT = os.path.dirname(_here)
HEADER = open(os.path.join(ROOT, "include", "dlinterop", "abi.h")).read()
FROZEN = check_abi.frozen_entries(os.path.join(_here, "abi", "table-1.txt"))
PXD = open(os.path.join(ROOT, "dlinterop", "_abi_table.pxd")).read()

MINOR = int(re.search(r"#define DLINTEROP_ABI_MINOR (\d+)", HEADER).group(1))
APPENDED = f"""  /* 1.{MINOR + 1} */
  int (*newer)(PyObject* obj);
}} DLInteropABI;"""
# The .pxd's last field, after which an appended entry goes.
LAST_FIELD = re.findall(
    r"\n(        \S.*\n)(?!        )", PXD.split('cdef extern from "abi_storage.h"')[0]
)[-1]


def test_the_tree_passes():
    assert check_abi.problems(HEADER, FROZEN, PXD) == []
    assert check_abi.main(["check_abi.py"]) == 0


def test_a_changed_signature_fails():
    header = HEADER.replace(
        "(DLManagedTensorVersioned* managed, int readonly)",
        "(DLManagedTensorVersioned* managed, int readonly, int flags)",
    )
    (message,) = check_abi.problems(header, FROZEN, PXD)
    assert message.startswith("entry 7 was `tensor_from_managed: PyObject* (*tensor_from_")
    assert "never change" in message


def test_a_moved_or_removed_entry_fails():
    header = HEADER.replace("  int (*is_tensor)(PyObject* obj);\n", "")
    found = check_abi.problems(header, FROZEN, PXD)
    assert found[0].startswith("entry 5 was `is_tensor:")
    assert any("is gone from the table" in m for m in found)
    assert any("_abi_table.pxd declares" in m for m in found)


def test_an_appended_entry_must_be_frozen_and_versioned():
    header = HEADER.replace("} DLInteropABI;", APPENDED)
    pxd = PXD.replace(LAST_FIELD, LAST_FIELD + "        int (*newer)(object obj)\n")
    found = check_abi.problems(header, FROZEN, pxd)
    assert any("the table gained newer: append them" in m for m in found)
    assert any(
        f"DLINTEROP_ABI_MINOR is {MINOR}, but the table's newest section is 1.{MINOR + 1}" in m
        for m in found
    )
    frozen = FROZEN + [("newer", "int (*newer)(PyObject* obj)")]
    header = header.replace(
        f"#define DLINTEROP_ABI_MINOR {MINOR}", f"#define DLINTEROP_ABI_MINOR {MINOR + 1}"
    )
    assert check_abi.problems(header, frozen, pxd) == []
