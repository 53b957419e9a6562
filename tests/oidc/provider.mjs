// The OpenID provider the access tests sign in through: npm's oidc-provider (OpenID Certified),
// with its own login and consent pages (devInteractions: any password is accepted; the login
// names an account of the accounts file). Started by tests/oidc_provider.py on a free
// 127.0.0.1 port:  node provider.mjs CONFIG.json
//
// CONFIG.json: {"port", "cert", "key" (PEM files: it serves HTTPS, as every real issuer does),
//   "accounts" (a JSON file {login: {email, name, groups: [...] or null, claims: {more claims}}}, read again on every lookup, so
//   a test changes a person's groups, or removes the person, while signed in), "clients" (client
//   metadata), "accessTokenTTL", "idTokenTTL" (seconds)}.
import fs from 'node:fs';
import https from 'node:https';

import Provider from 'oidc-provider';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const issuer = `https://127.0.0.1:${config.port}`;

function accounts() {
  return JSON.parse(fs.readFileSync(config.accounts, 'utf8'));
}

const provider = new Provider(issuer, {
  clients: config.clients,
  async findAccount(ctx, id) {
    const person = accounts()[id];
    if (!person) return undefined;   // removed at the provider: its refresh tokens stop working
    return {
      accountId: id,
      async claims() {
        const claims = { sub: id, email: person.email, email_verified: true, name: person.name, ...(person.claims || {}) };
        // "groups": null: no groups claim at all (e.g. Entra ID's overage, sent as "claims":
        // {"_claim_names": ..., "_claim_sources": ...} instead)
        if (person.groups !== null) claims.groups = person.groups || [];
        return claims;
      },
    };
  },
  claims: {
    openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'],
  },
  scopes: ['openid', 'offline_access', 'profile', 'email', 'groups'],
  // The ID token carries the scopes' claims (groups too), as Okta, Keycloak and Dex send them:
  // kubectl's ID token is what kubedash's API reads the groups from.
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    backchannelLogout: { enabled: true },
    revocation: { enabled: true },
  },
  ttl: {
    AccessToken: config.accessTokenTTL || 3600,
    IdToken: config.idTokenTTL || 3600,
    RefreshToken: 86400,
    Grant: 86400,
    Session: 86400,
    Interaction: 3600,
  },
  pkce: { required: () => true },
  // Its outgoing requests (the back-channel logout POST) refuse special-use addresses against
  // SSRF; the kubedash under test is on 127.0.0.1.
  fetch: (url, options) => {
    delete options.dispatcher;
    return globalThis.fetch(url, options);
  },
  cookies: { keys: ['kubedash-test-provider'] },
});
provider.on('server_error', (ctx, err) => console.error('server_error', err));
// What the tests count: each token grant (a refresh once per session, however many tabs) and
// each back-channel logout sent.
provider.on('grant.success', (ctx) => console.log(`grant ${ctx.oidc.params.grant_type}`));
provider.on('grant.error', (ctx, err) => console.log(`grant-error ${ctx.oidc.params.grant_type} ${err.message}`));
provider.on('backchannel.success', (ctx, client, accountId, sid) => console.log(`backchannel ${accountId} ${sid}`));
provider.on('backchannel.error', (ctx, err) => console.log(`backchannel-error ${err.message} ${err.cause || ''}`));

const server = https.createServer({
  cert: fs.readFileSync(config.cert), key: fs.readFileSync(config.key),
}, provider.callback());
server.listen(config.port, '127.0.0.1', () => console.log(`oidc-provider listening on ${issuer}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
