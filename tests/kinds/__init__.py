"""The three kinds (and Events): each strategy's rules as plain functions, the pod template,
and each kind's pages and actions."""
