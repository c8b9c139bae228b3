"""The documents' shapes and how they are read and written: the bottom of the report package."""
