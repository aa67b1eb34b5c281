"""Data loaders (FLORES-200, MGSM) and language-code tables."""
