// The API client. The key lives in this tab's sessionStorage only and goes
// out as the bearer on every call; a 401 asks for it (once per call) and
// the call is sent again.

const KEY = 'engram.api-key';

export function apiKey() {
  return sessionStorage.getItem(KEY);
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** A problem response (RFC 9457) or a network failure. */
export class ApiError extends Error {
  constructor(status, problem) {
    const detail = problem?.detail || `the request failed (${status || 'network error'})`;
    super(problem?.field ? `${detail} (field: ${problem.field})` : detail);
    this.status = status;
    this.problem = problem;
  }
}

let askForKey = async () => false;
// Calls refused together (a page makes several at once) share one prompt.
let asking = null;

/** Sets what is called on a 401: resolves true once a new key is set. */
export function onUnauthorized(ask) {
  askForKey = ask;
}

function askOnce(reason) {
  asking ??= askForKey(reason).finally(() => { asking = null; });
  return asking;
}

/** Calls the API; the parsed JSON body, or null for 204. */
export async function api(method, path, body) {
  for (let asked = false; ; asked = true) {
    const headers = { Accept: 'application/json' };
    const key = apiKey();
    if (key) headers.Authorization = `Bearer ${key}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let response;
    try {
      response = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch (err) {
      throw new ApiError(0, { detail: `Engram did not answer: ${err.message}` });
    }
    if (response.status === 204) return null;
    const data = await response.json().catch(() => null);
    if (response.status === 401 && !asked && (await askOnce(data?.detail))) continue;
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body);
export const del = (path) => api('DELETE', path);

/** A query string of the non-empty entries of `params`. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') search.set(name, value);
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}
