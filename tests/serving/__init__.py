"""How HTTP reaches Django: lanes and workers, bounded input and slow clients, the expensive
lane's child process, readiness, and the library internals server/ relies on."""
