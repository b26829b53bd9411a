"""Pi's dialect: its files, number layout, migration and conversion."""
