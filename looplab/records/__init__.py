"""The results document (one owner: schema, read, write, merge), what is derived from it, the measurement
documents (the caps doc, the bench result) and the kept measurements of every framework version (`history`)."""
