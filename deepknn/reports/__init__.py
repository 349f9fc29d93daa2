"""Everything drawn or written for a reader: plots, tables, HTML pages, paper analyses."""
