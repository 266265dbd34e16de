// A real OAuth 2.1 authorization server on loopback for the end-to-end sign-in tests:
// panva's oidc-provider (OpenID Certified), pinned in tests/e2e/package.json.
//
//   node authorization_server.mjs [--access-token-ttl SECONDS] [--events FILE] [--deny | --hold-consent]
//                                 [--client-id ID --client-secret SECRET]
//
// Listens on 127.0.0.1 on a port free at that moment and prints one line on stdout once it
// accepts connections: {"issuer": "http://127.0.0.1:PORT"}. Stops on SIGTERM or SIGINT.
//
// What it offers, as a remote MCP server's authorization server does:
// - OpenID discovery (/.well-known/openid-configuration; no RFC 8414 document, so a client
//   has to use the OpenID fallback), dynamic client registration (/reg, open), and with
//   --client-id a pre-registered confidential client (client_secret_basic, any loopback port),
// - the authorization code grant with PKCE required (S256 only) for every client,
// - resource indicators (RFC 8707): a resource on loopback ending in /mcp gets JWT access
//   tokens (RS256, signed with a key made at startup, published at /jwks) whose audience is
//   that resource and whose scope is `mcp:tools`; any other resource is refused (invalid_target),
// - refresh tokens for every client allowed the refresh_token grant (rotated on use),
// - interactions that approve at once: /interaction/UID signs the fixed user "e2e-user" in and
//   grants what was asked, then redirects on, so a headless "browser" that follows redirects
//   (and keeps cookies) completes the flow; with --deny it answers access_denied instead; with
//   --hold-consent the consent page answers only once the person approves, as a person takes
//   their time: each `POST /e2e/approve` (from a test) approves one consent, waiting or next.
// - tokens already expired on demand: after `POST /e2e/expire-next?ago=SECONDS` (from a test) the
//   next access token issued ran out SECONDS ago (its `iat` and `exp` moved back together: its
//   lifetime is still --access-token-ttl), so a test sees the expiry path without waiting for it.
//   Only the JWT is moved back: the token response's `expires_in` still says the whole lifetime.
//
// --events FILE gets one JSON line per authorization request, registration and token request
// (grant type, status; never a token), so a test can see e.g. that a refresh_token grant happened.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';

const { values: args } = parseArgs({
  options: {
    'access-token-ttl': { type: 'string', default: '3600' },
    events: { type: 'string' },
    deny: { type: 'boolean', default: false },
    'hold-consent': { type: 'boolean', default: false },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
  },
});
// --hold-consent: each consent waits for one approval (given before or while it waits).
let approvals = 0;
const held = [];
function approve() {
  if (held.length) held.shift()();
  else approvals += 1;
}
async function approved() {
  if (!args['hold-consent']) return;
  if (approvals > 0) {
    approvals -= 1;
    return;
  }
  record({ event: 'consent-held' });
  await new Promise((resolve) => { held.push(resolve); });
}
const ACCESS_TOKEN_TTL = Number(args['access-token-ttl']);
// POST /e2e/expire-next: how many seconds ago each of the next access tokens ran out, in order.
const expireNext = [];
const ACCOUNT = 'e2e-user';
const SCOPE = 'mcp:tools';

function record(event) {
  if (args.events) appendFileSync(args.events, `${JSON.stringify({ at: Date.now() / 1000, ...event })}\n`);
}

function isLoopbackMcpResource(value) {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' && url.hostname === '127.0.0.1' && url.pathname.endsWith('/mcp') && !url.hash;
  } catch {
    return false;
  }
}

const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });

// --client-id/--client-secret: a client registered beforehand (a native app: any loopback port).
const clients = args['client-id'] ? [{
  client_id: args['client-id'],
  client_secret: args['client-secret'],
  application_type: 'native',
  redirect_uris: ['http://127.0.0.1/callback'],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_basic',
}] : [];

const configuration = {
  clients,
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  jwks: { keys: [{ ...signingKey, kid: 'e2e-signing-key', alg: 'RS256', use: 'sig' }] },
  scopes: ['openid', 'offline_access', SCOPE],
  claims: { openid: ['sub'] },
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  pkce: { methods: ['S256'], required: () => true },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A token request without `resource` gets a token for the one resource granted.
      useGrantedResource: async () => true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      getResourceServerInfo: async (_ctx, resource) => {
        if (!isLoopbackMcpResource(resource)) throw new Provider.errors.InvalidTarget();
        return {
          scope: SCOPE,
          audience: resource,
          accessTokenTTL: ACCESS_TOKEN_TTL,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  expiresWithSession: async () => false,
  ttl: { AccessToken: ACCESS_TOKEN_TTL },
  formats: {
    customizers: {
      // The JWT as signed: one asked for by POST /e2e/expire-next is issued already expired.
      async jwt(_ctx, _token, jwt) {
        if (!expireNext.length) return;
        const ago = expireNext.shift();
        const lifetime = jwt.payload.exp - jwt.payload.iat;
        jwt.payload.exp = Math.floor(Date.now() / 1000) - ago;
        jwt.payload.iat = jwt.payload.exp - lifetime;
      },
    },
  },
  interactions: { url: async (_ctx, interaction) => `/interaction/${interaction.uid}` },
  renderError: async (ctx, out) => {
    ctx.type = 'json';
    ctx.body = out;
  },
};

async function interact(provider, req, res) {
  const { prompt, params, grantId } = await provider.interactionDetails(req, res);
  record({ event: 'interaction', prompt: prompt.name, client_id: params.client_id });
  if (args.deny) {
    const result = { error: 'access_denied', error_description: 'the e2e user said no' };
    await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: ACCOUNT } }, { mergeWithLastSubmission: false });
    return;
  }
  // consent: grant everything that was asked for, once the person approves
  await approved();
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: ACCOUNT, clientId: params.client_id });
  const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = prompt.details;
  if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
  if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scopes.join(' '));
  }
  await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, {
    mergeWithLastSubmission: true,
  });
}

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration);

  provider.use(async (ctx, next) => {
    await next();
    const params = ctx.oidc?.params ?? {};
    const route = ctx.oidc?.route;
    if (route === 'authorization' || route === 'resume') {
      record({
        event: route,
        status: ctx.status,
        client_id: params.client_id,
        scope: params.scope,
        resource: params.resource,
        code_challenge_method: params.code_challenge_method,
        redirect_uri: params.redirect_uri,
      });
    } else if (route === 'token') {
      record({ event: 'token', status: ctx.status, grant_type: params.grant_type, resource: params.resource });
    } else if (route === 'registration') {
      record({ event: 'registration', status: ctx.status });
    }
  });

  const app = provider.callback();
  server.on('request', (req, res) => {
    if (req.method === 'POST' && req.url === '/e2e/approve') {
      record({ event: 'approved' });
      approve();
      res.statusCode = 204;
      res.end();
    } else if (req.method === 'POST' && req.url.startsWith('/e2e/expire-next')) {
      const given = new URL(req.url, issuer).searchParams.get('ago');
      const ago = Number(given);
      if (given === null || !Number.isInteger(ago) || ago < 0) {
        res.statusCode = 400;
        res.end('ago: a whole number of seconds, 0 or more');
        return;
      }
      record({ event: 'expire-next', ago });
      expireNext.push(ago);
      res.statusCode = 204;
      res.end();
    } else if (req.url.startsWith('/interaction/')) {
      interact(provider, req, res).catch((error) => {
        console.error('interaction failed:', error);
        res.statusCode = 500;
        res.end('interaction failed');
      });
    } else {
      app(req, res);
    }
  });
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
