"""Who may do what: authentication and roles on the API, access reviews, impersonation, admin
rights, security of the pages (CSRF, XSS, headers), share links, and revocation across processes."""
