"""Running kubedash: the operational commands, TLS, the deployment artifacts (nginx, image,
compose, Kubernetes manifests), maintenance and shutdown, metrics and logs, backup and restore,
settings from the environment."""
