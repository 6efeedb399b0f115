// A real OpenID provider (panva's oidc-provider, certified) for Engram's
// OAuth tests: it listens on a free loopback port, issues JWT access
// tokens for any resource (the audience is whatever the client asks
// for, RFC 8707), and prints `listening <issuer>` once it answers.
//
// One argument, a JSON object:
//   keys     a file of private JWKs: read when it exists, else written
//            (two providers given one file sign alike)
//   clients  [{ client_id, client_secret, alg, ttl, claims }]: the
//            signing algorithm of a client's tokens (RS256 by default,
//            ES256, or HS256 with `secret`), their lifetime in seconds,
//            and extra claims written into them
//
// `POST /test/rotate` replaces the signing keys with new ones (new
// `kid`s), as an operator rotating keys would; the issuer stays.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';

import Provider from 'oidc-provider';
import { exportJWK, generateKeyPair } from 'jose';

const settings = JSON.parse(process.argv[2]);
const clientsById = new Map(settings.clients.map((client) => [client.client_id, client]));
const SCOPES = 'openid repo:* user:* repo:forge repo:other user:ana user:bob';

async function newKeys() {
  const keys = [];
  for (const alg of ['RS256', 'ES256']) {
    const { privateKey } = await generateKeyPair(alg, { extractable: true });
    keys.push({ ...(await exportJWK(privateKey)), alg, use: 'sig', kid: `${alg}-${randomUUID()}` });
  }
  return keys;
}

async function startingKeys() {
  if (existsSync(settings.keys)) {
    return JSON.parse(readFileSync(settings.keys, 'utf8'));
  }
  const keys = await newKeys();
  writeFileSync(settings.keys, JSON.stringify(keys));
  return keys;
}

function provider(issuer, keys) {
  const made = new Provider(issuer, {
    jwks: { keys },
    clients: settings.clients.map(({ client_id, client_secret }) => ({
      client_id,
      client_secret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    })),
    features: {
      clientCredentials: { enabled: true },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource, client) => {
          const { alg = 'RS256', secret } = clientsById.get(client.clientId) ?? {};
          const sign = alg === 'HS256' ? { alg, key: secret } : { alg };
          return {
            scope: SCOPES,
            audience: resource,
            accessTokenFormat: 'jwt',
            jwt: { sign },
          };
        },
      },
    },
    extraTokenClaims: (_ctx, token) => clientsById.get(token.clientId)?.claims,
    ttl: {
      ClientCredentials: (_ctx, _token, client) => clientsById.get(client.clientId)?.ttl ?? 600,
      AccessToken: () => 600,
    },
    pkce: { required: () => true },
  });
  made.proxy = false;
  return made;
}

const server = createServer();
server.listen(0, '127.0.0.1', async () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  let current = provider(issuer, await startingKeys());
  server.on('request', async (req, res) => {
    if (req.method === 'POST' && req.url === '/test/rotate') {
      current = provider(issuer, await newKeys());
      res.writeHead(204).end();
      return;
    }
    current.callback()(req, res);
  });
  console.log(`listening ${issuer}`);
});
