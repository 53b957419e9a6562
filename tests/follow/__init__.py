"""Following real clusters: a second kubedash (or a stub) is the upstream; configuration,
credentials, the follower's copy, writes through to the upstream, hostile upstreams."""
