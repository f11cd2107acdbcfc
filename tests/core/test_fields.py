"""Reading checked fields of a saved document (`graphcmp.core.fields.Fields`)."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.fields import Fields

STATUS = (-2, -1, 0, 1, 2)


def test_an_enum_column_of_an_npz_result_is_checked_as_stored():
    stored = np.array([0, 2, -2, 1], np.int8)
    stored.flags.writeable = False  # as a column mapped from the file
    out = Fields({"status": stored}, "cmp.npz").codes("status", 4, STATUS, np.int16)
    assert out.dtype == np.int16 and out.tolist() == [0, 2, -2, 1] and out.flags.writeable


@pytest.mark.parametrize("stored", [np.array([0, 2, 100], np.int8), np.array([0, 2, 255], np.uint8),
                                    np.array([0, 2, 70000], np.int64), [0, 2, 300]])
def test_a_code_outside_the_enum_is_named_with_its_row(stored):
    bad = int(stored[2])
    with pytest.raises(DumpFormatError, match=rf"cmp.npz: field status holds {bad} \(row 2\), expected one of"):
        Fields({"status": stored}, "cmp.npz").codes("status", 3, STATUS, np.int8)
