"""The web dashboard: server-rendered pages over the app's reads, and the pure pieces they draw with."""
