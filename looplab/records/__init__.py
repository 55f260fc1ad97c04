"""The results document (one owner: schema, read, write, merge) and what is derived from it."""
