// Run by tests/test_sdk_oauth.py under Node 22: the official TypeScript SDK client signs in by OAuth.
//
// `node oauth_ts.mjs CLIENT_DIST URL REDIRECT_URI` connects one Client over Streamable HTTP to the MCP
// server at URL, its transport given an in-memory OAuthClientProvider with no client registered. It
// lists the tools, then calls `get_wagers` for chain 137: the server answers 401 with its challenge,
// and the SDK discovers (protected resource metadata, authorization server metadata), registers
// dynamically, and sends the user agent to the authorization URL with PKCE, which ends the call with
// UnauthorizedError. As the SDK's docs have an interactive client do, it then calls
// `transport.finishAuth` with the callback's parameters, reconnects with the same provider, and calls
// again.
//
// The user agent is the test's: `redirectToAuthorization` prints `{"authorize": URL}` as one line on
// stdout and reads the redirect the consent produced (REDIRECT_URI with code, state and iss) as one
// line on stdin. The last stdout line is the report: what the call returned, the ids of the wagers it
// read, the client it registered, what was asked for, and the SHA-256 of the access token the
// provider holds, never the token.
import { createHash, randomBytes } from "node:crypto";
import readline from "node:readline";

const [dist, url, redirectUri] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport, UnauthorizedError } = await import(new URL("index.mjs", dist).href);
const stdin = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (line) => process.stdout.write(JSON.stringify(line) + "\n");

class MemoryProvider {
  constructor() {
    this.state_ = randomBytes(24).toString("base64url");
    this.authorizations = [];
    this.callback = undefined;
    this.client = undefined;
    this.tokens_ = undefined;
    this.verifier = undefined;
  }
  get redirectUrl() {
    return redirectUri;
  }
  get clientMetadata() {
    return {
      client_name: "fairwins-mcp tests: TypeScript SDK",
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() {
    return this.state_;
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(information) {
    this.client = information;
  }
  tokens() {
    return this.tokens_;
  }
  saveTokens(tokens) {
    this.tokens_ = tokens;
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  // The browser: the test opens the URL, submits the consent and hands back where it was sent.
  async redirectToAuthorization(authorizationUrl) {
    this.authorizations.push(authorizationUrl.href);
    say({ authorize: authorizationUrl.href });
    const { value, done } = await stdin.next();
    if (done) throw new Error("stdin ended before the consent's redirect came back");
    this.callback = new URL(value.trim());
  }
}

const provider = new MemoryProvider();
const connect = async () => {
  const client = new Client({ name: "fairwins-oauth-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
  return { client, transport };
};
const wagers = { name: "get_wagers", arguments: { chainId: 137 } };

let { client, transport } = await connect();
const listed = (await client.listTools()).tools.some((tool) => tool.name === "get_wagers");
const report = { sdk: "typescript", listed, tokenBeforeCall: provider.tokens_ !== undefined };
let result;
try {
  result = await client.callTool(wagers);
  report.firstCall = "answered";
} catch (error) {
  report.firstCall = `${error.constructor.name}: ${error.message}`;
  if (!(error instanceof UnauthorizedError) || provider.callback === undefined) throw error;
  const params = provider.callback.searchParams;
  if (params.get("state") !== provider.state_) throw new Error(`state ${params.get("state")} came back, not ours`);
  await transport.finishAuth(params);
  await client.close();
  ({ client, transport } = await connect());
  result = await client.callTool(wagers);
}
await client.close().catch(() => {});

const chains = result.structuredContent?.chains ?? [];
const asked = provider.authorizations.length ? new URL(provider.authorizations[0]).searchParams : new URLSearchParams();
const token = provider.tokens_?.access_token;
Object.assign(report, {
  isError: result.isError ?? false,
  text: result.isError ? result.content.map((b) => b.text ?? "").join(" ").slice(0, 300) : "",
  wagers: chains.flatMap((chain) => (chain.wagers ?? []).map((wager) => wager.id)),
  authorizations: provider.authorizations.length,
  resource: asked.get("resource"),
  scope: asked.get("scope"),
  clientId: provider.client?.client_id ?? null, // a public client's: no secret
  tokenSha256: token ? createHash("sha256").update(token).digest("hex") : null,
  granted: provider.tokens_?.scope ?? null,
});
say(report);
process.exit(0);
