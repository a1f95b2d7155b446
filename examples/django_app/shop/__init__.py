"""An example Django project whose views enqueue jobloom jobs in their own transaction."""
