"""``make bench``: synthetic DataHub catalogs, the stand-in GMS, and scans measured per backend."""
