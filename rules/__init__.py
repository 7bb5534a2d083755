"""Rule catalog data (TOML entries); see trainlint.catalog."""
