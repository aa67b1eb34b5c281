"""Tasks as data: task files, their datasets, prompts and answer types."""
