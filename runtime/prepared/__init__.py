"""What prepare() returns: one small wrapper module per kind of object."""
