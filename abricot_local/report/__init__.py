"""What finished runs look like: tables, the HTML page, figures, the sample table, text tables."""
