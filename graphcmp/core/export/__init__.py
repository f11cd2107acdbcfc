"""Writers of graphcmp's own JSON documents (and, later, of other viewers' formats)."""
