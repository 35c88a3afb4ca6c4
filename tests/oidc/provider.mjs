// node-oidc-provider (npm oidc-provider, pinned in tests/tools/npm_tool.sh) set up as the authorization
// server of the MCP authorization flow, for the tests: a real third-party OAuth 2.1 server, stock but
// for its configuration and a one-button consent page that stands in for signing in.
//
//   node tests/oidc/provider.mjs --port 0 --resource http://127.0.0.1:8790/mcp --scopes "read:wagers read:fees"
//
// prints `issuer http://127.0.0.1:<port>` on stdout once it listens (--port 0: a free port), and
// logs refusals on stderr. What it serves: discovery at /.well-known/openid-configuration and
// /.well-known/oauth-authorization-server; dynamic client registration (public clients,
// token_endpoint_auth_method "none"); the authorization code grant with PKCE S256 required of every
// client; RFC 8707 resource indicators (only the --resource values, exactly as given), each one a
// resource server whose access tokens are RFC 9068 JWTs (typ at+jwt) signed with --alg, aud the
// resource, scope the granted --scopes; refresh tokens (rotated) for clients registered with the
// refresh_token grant, offline_access or not (an MCP server never advertises offline_access); its
// keys, an RSA and a P-256 key made at start, at /jwks. State lives in memory, for one run.
//
// The interaction at /interaction/<uid>: GET shows a page with the client, the resource, the scopes
// and one button; POST (the button, or a test submitting the form) signs in as --account and
// grants what the request asked for, then the provider redirects back to the client with a code.
// No other sign-in exists (devInteractions is off).
import { generateKeyPairSync, randomBytes } from "node:crypto";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const MODULES = process.env.OIDC_PROVIDER_MODULES ?? path.join(here, "..", "..", ".tools", "oidc-provider", "node_modules");
const { default: Provider, errors } = await import(path.join(MODULES, "oidc-provider", "lib", "index.js"));

const OIDC_SCOPES = ["openid", "offline_access"]; // the provider's own scopes
const MEMBER_A = "0xA11ce00000000000000000000000000000000A11"; // tests/sandbox_gateway.py ACCOUNT_A

const { values: args } = parseArgs({
  options: {
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "0" },
    resource: { type: "string", multiple: true, default: [] },
    scopes: { type: "string", default: "" },
    account: { type: "string", default: MEMBER_A },
    alg: { type: "string", default: "RS256" },
    ttl: { type: "string", default: "600" },
  },
});
const resources = args.resource;
const scopes = args.scopes.split(/\s+/).filter(Boolean);
const ttl = Number(args.ttl);
function usage(message) {
  console.error(`provider.mjs: ${message}`);
  process.exit(2);
}
if (resources.length === 0) usage("at least one --resource URL is required");
for (const resource of resources) {
  const url = URL.parse(resource);
  if (!url || url.hash || resource.includes("#")) usage(`--resource ${resource}: an absolute URL without a fragment`);
}
if (scopes.length === 0) usage("--scopes names the scopes the resources offer, space-separated");
if (!["RS256", "ES256"].includes(args.alg)) usage("--alg is RS256 or ES256");
if (!(ttl > 0)) usage("--ttl is the access tokens' lifetime in seconds");

// The signing keys, made at start: the private JWKs go to the provider, which serves the public halves.
function signingKey(alg) {
  const pair = alg === "RS256"
    ? generateKeyPairSync("rsa", { modulusLength: 2048 })
    : generateKeyPairSync("ec", { namedCurve: "P-256" });
  const kid = `${alg.toLowerCase()}-${randomBytes(6).toString("hex")}`;
  return { ...pair.privateKey.export({ format: "jwk" }), kid, alg, use: "sig" };
}

// Listening first, so the issuer names the port that was free.
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(Number(args.port), args.host, resolve);
});
const issuer = `http://${args.host}:${server.address().port}`;

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey("RS256"), signingKey("ES256")] },
  cookies: { keys: [randomBytes(32).toString("hex")] },
  // The resources' scopes too: a client may register with them (its `scope` metadata), as the SDKs
  // do with the scope of the 401 challenge, and node-oidc-provider refuses a registration naming a
  // scope outside this list. Each access token still carries only its resource's scopes.
  scopes: [...OIDC_SCOPES, ...scopes],
  responseTypes: ["code"], // OAuth 2.1: the authorization code grant only, no implicit
  findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // No resource asked for: the first one. Several granted and none named at /token: refused.
      defaultResource: (ctx, client, oneOf) => oneOf ?? resources[0],
      getResourceServerInfo: (ctx, resource) => {
        if (!resources.includes(resource)) throw new errors.InvalidTarget(`${resource} is not a resource of this server`);
        return {
          scope: scopes.join(" "),
          audience: resource,
          accessTokenFormat: "jwt",
          accessTokenTTL: ttl,
          jwt: { sign: { alg: args.alg } },
        };
      },
      useGrantedResource: () => true,
    },
  },
  pkce: { required: () => true }, // S256 is the only method node-oidc-provider 9 offers
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed("refresh_token"),
  expiresWithSession: () => false,
  // The defaults of these, written out (the provider warns about any left to its default).
  clientBasedCORS: (ctx, origin, client) =>
    origin !== "null" && client.redirectUris.some((uri) => URL.parse(uri)?.origin === origin),
  ttl: {
    AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl,
    AuthorizationCode: 60,
    Grant: 3600,
    IdToken: 600,
    Interaction: 600,
    RefreshToken: 86400,
    Session: 86400,
  },
  renderError: (ctx, out) => {
    ctx.type = "html";
    ctx.body = page("Error", `<p>${html(out.error)}: ${html(out.error_description ?? "")}</p>`);
  },
});

function html(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title, body) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${html(title)}</title></head>`
    + `<body><h1>${html(title)}</h1>${body}</body></html>`;
}

function requestedResources(params) {
  const asked = [params.resource ?? []].flat();
  return asked.length ? asked : [resources[0]];
}

// The consent page: who asks, for what, and one button.
async function showInteraction(ctx, uid) {
  const { params } = await provider.interactionDetails(ctx.req, ctx.res);
  const client = await provider.Client.find(params.client_id);
  const list = (items) => `<ul>${items.map((item) => `<li><code>${html(item)}</code></li>`).join("")}</ul>`;
  ctx.type = "html";
  ctx.body = page("Sign in and allow access", [
    `<p>${html(client?.clientName ?? params.client_id)} asks to act as <code>${html(args.account)}</code> on</p>`,
    list(requestedResources(params)),
    "<p>with the scopes</p>",
    list(String(params.scope ?? "").split(" ").filter(Boolean)),
    `<form method="post" action="/interaction/${html(uid)}"><button type="submit">Allow</button></form>`,
  ].join(""));
}

// The button: sign in as --account (when not yet signed in) and grant what was asked for.
async function approve(ctx) {
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params } = details;
  const accountId = details.session?.accountId ?? args.account;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId, clientId: params.client_id });
  // Granted twice, as the consent prompt counts them: every known scope asked for (the provider's
  // list, which holds the resources' scopes too), and each resource's own.
  const asked = String(params.scope ?? "").split(" ").filter(Boolean);
  const known = asked.filter((scope) => OIDC_SCOPES.includes(scope) || scopes.includes(scope));
  if (known.length) grant.addOIDCScope(known.join(" "));
  for (const resource of requestedResources(params)) {
    grant.addResourceScope(resource, asked.filter((scope) => scopes.includes(scope)).join(" "));
  }
  const missing = prompt.details ?? {};
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [resource, scope] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scope.join(" "));
  }
  const result = { consent: { grantId: await grant.save() } };
  if (prompt.name === "login") result.login = { accountId };
  ctx.respond = false; // interactionFinished writes the 303 itself
  await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
}

provider.use(async (ctx, next) => {
  const match = /^\/interaction\/([\w-]+)$/.exec(ctx.path);
  if (!match) return next();
  ctx.set("cache-control", "no-store");
  try {
    if (ctx.method === "GET") return await showInteraction(ctx, match[1]);
    if (ctx.method === "POST") return await approve(ctx);
    ctx.status = 405;
  } catch (err) {
    if (!(err instanceof errors.SessionNotFound)) throw err;
    ctx.respond = true;
    ctx.status = err.status;
    ctx.type = "html";
    ctx.body = page("Error", `<p>${html(err.message)}: ${html(err.error_description ?? "")}</p>`);
  }
});

// Dynamic registration from a browser (the MCP Inspector's OAuth flow runs in its page): the provider
// answers CORS on its discovery, JWKS and token endpoints, not on /reg. Registration here is open to
// anyone anyway, so any origin may call it.
provider.use(async (ctx, next) => {
  const origin = ctx.get("origin");
  if (ctx.path !== "/reg" || !origin) return next();
  if (ctx.method === "OPTIONS") {
    ctx.set("access-control-allow-methods", "POST");
    ctx.set("access-control-allow-headers", ctx.get("access-control-request-headers") || "content-type");
    ctx.status = 204;
  } else {
    await next();
  }
  ctx.set("access-control-allow-origin", origin);
  ctx.vary("origin");
});

for (const event of ["authorization.error", "grant.error", "registration_create.error", "server_error"]) {
  provider.on(event, (ctx, err) => console.error(`${event}: ${err.error ?? err.name}: ${err.error_description ?? err.message}`));
}

server.on("request", provider.callback());
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
console.log(`issuer ${issuer}`);
