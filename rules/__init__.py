"""One module per rule, named am<code>_<snake name>.py. Discovery is automatic (see
migrator/registry.py): adding a module here is all it takes to register a rule."""
