// What a remote MCP client (claude.ai's connectors, ChatGPT's) does to
// get a token for Engram from an authorization server it has never met:
// registers itself (dynamic client registration), sends the person to
// sign in and consent (the authorization code flow with PKCE, for the
// resource, RFC 8707), and redeems the code. The person is played by
// filling the provider's own sign-in and consent forms.
//
// Arguments: the issuer, the resource, the scopes, the login.
// Prints the access token.
import { createHash, randomBytes } from 'node:crypto';

const [issuer, resource, scope, login] = process.argv.slice(2);
const redirectUri = 'http://127.0.0.1:9/callback';
const cookies = new Map();

async function call(url, options = {}) {
  const response = await fetch(new URL(url, issuer), {
    ...options,
    redirect: 'manual',
    headers: {
      ...options.headers,
      cookie: [...cookies].map(([name, value]) => `${name}=${value}`).join('; '),
    },
  });
  for (const cookie of response.headers.getSetCookie()) {
    const [pair] = cookie.split(';');
    const at = pair.indexOf('=');
    cookies.set(pair.slice(0, at), pair.slice(at + 1));
  }
  return response;
}

function form(fields) {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  };
}

// Follows redirects within the provider until one leaves it (to the
// client's redirect URI) or a page asks the person something.
async function follow(response) {
  let current = response;
  while (current.status >= 300 && current.status < 400) {
    const location = current.headers.get('location');
    if (location.startsWith(redirectUri)) {
      return { redirected: new URL(location) };
    }
    current = await call(location);
  }
  return { page: await current.text() };
}

const metadata = await (await call('/.well-known/openid-configuration')).json();

const registered = await (await call(metadata.registration_endpoint, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({
    client_name: 'A remote MCP client',
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  }),
})).json();

const verifier = randomBytes(32).toString('base64url');
const challenge = createHash('sha256').update(verifier).digest('base64url');
const authorize = new URL(metadata.authorization_endpoint);
authorize.search = new URLSearchParams({
  client_id: registered.client_id,
  response_type: 'code',
  redirect_uri: redirectUri,
  scope,
  resource,
  code_challenge: challenge,
  code_challenge_method: 'S256',
  state: 'a-state',
}).toString();

let step = await follow(await call(authorize));
// The sign-in form, then the consent form: each posts its `prompt`.
for (let asked = 0; step.page !== undefined; asked += 1) {
  if (asked > 3) throw new Error(`the provider keeps asking: ${step.page}`);
  const action = step.page.match(/<form[^>]*action="([^"]+)"/)[1];
  const prompt = step.page.match(/name="prompt" value="([^"]+)"/)[1];
  const fields = prompt === 'login' ? { prompt, login, password: 'any' } : { prompt };
  step = await follow(await call(action, form(fields)));
}
const code = step.redirected.searchParams.get('code');
if (!code) throw new Error(`no code: ${step.redirected}`);

const token = await (await call(metadata.token_endpoint, form({
  grant_type: 'authorization_code',
  code,
  redirect_uri: redirectUri,
  client_id: registered.client_id,
  code_verifier: verifier,
  resource,
}))).json();
if (!token.access_token) throw new Error(`no token: ${JSON.stringify(token)}`);
console.log(token.access_token);
