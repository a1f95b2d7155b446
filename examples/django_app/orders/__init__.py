"""Orders: each order made gets a receipt job, in the same transaction."""
