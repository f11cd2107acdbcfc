"""What the compiled pass over dump.json (`msprobe_scan`) writes where: shared by its kernels
(`msprobe_scan_kernels`, compiled) and the Python that drives them and reads their outputs."""

from __future__ import annotations

# what `_scan` returns
_DONE, _PAUSE, _GROW, _BAD = 0, 1, 2, 3
# `state`: where the walk is and how much of each output it filled
(_PHASE, _POS, _RECORDS, _LEAVES, _ODD, _ID_BYTES, _HEAP_BYTES, _ODD_BYTES, _ENTRIES, _HEADER, _DATA_SEEN,
 _RECENT) = range(12)
_STATE_SIZE = _RECENT + 5  # _RECENT + tag: the text last interned with that tag (consecutive leaves share most)
# the int32 columns of a leaf row
_NODE, _ROLE, _SLOT, _DTYPE, _SHAPE, _MD5, _FILE, _VALUE, _GRAD, _FLAGS, _COLUMNS = range(11)
_HAS_DTYPE = 1  # _FLAGS: the leaf has a "dtype" key (`md5_flag` looks for the first such leaf)
_HAS_MD5 = 2
_OTHER_LEAF = 4  # not a tensor: its row comes from `leaf_row` of its text (interned in _VALUE)
# tags of interned texts: how each becomes a string
_TEXT, _SLOT_KEY, _RAW_JSON, _FILE_NAME, _LEAF_JSON = range(5)
# codes of texts every column may hold without an interned entry
_EMPTY, _SCALAR = -1, -2
_ODD_RECORD, _BROKEN, _FULL = -1, -2, -3  # what the parsing functions return instead of a position
