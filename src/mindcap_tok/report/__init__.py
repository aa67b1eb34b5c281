"""Tables and figures (matplotlib, Agg backend; files written atomically)."""
