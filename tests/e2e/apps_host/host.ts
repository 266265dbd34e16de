/**
 * An MCP Apps host in a web page, as a chat client with MCP Apps support runs one, for
 * tests/e2e/test_apps_host.py. Bundled by ./build (esbuild) with the TS SDK client and
 * ext-apps' app-bridge; served from another origin than the gateway, so every request to
 * the gateway is a cross-origin fetch the gateway must answer with CORS.
 *
 * What it does, as a host does when a model picks a tool that has a UI:
 * 1. connects to `?gateway=` (the /mcp URL) over Streamable HTTP, declaring the UI extension;
 * 2. lists tools and picks `?tool=` (the server's own name; exposed as `server__tool`) among
 *    those with `_meta.ui.resourceUri`; when `find_tools` is listed (search mode), first calls it
 *    with `?query=`, as the model is told to, and lists again (found tools join the listing);
 * 3. calls the tool, reads its `ui://` resource;
 * 4. renders the HTML in a sandboxed iframe (an opaque origin) through AppBridge over
 *    PostMessageTransport, and once the app is initialized sends it the call's input and result;
 * 5. passes each tools/call the app makes back through the same client, as AppBridge does.
 *
 * Everything it sees goes to `window.host` (HostState), which the test reads.
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  AppBridge,
  PostMessageTransport,
  getToolUiResourceUri,
  isToolVisibilityAppOnly,
} from "@modelcontextprotocol/ext-apps/app-bridge";

const UI_EXTENSION = "io.modelcontextprotocol/ui";
const APP_MIME_TYPE = "text/html;profile=mcp-app";
const HOST = { name: "patchbay-e2e-apps-host", version: "1.0.0" };

interface Step {
  step: string;
  /** Milliseconds since the page's script started. */
  ms: number;
  [seen: string]: unknown;
}

interface AppCall {
  name: string;
  arguments: unknown;
  ms: number;
  answeredMs?: number;
  isError?: boolean;
  text?: string;
  structured?: string[];
  error?: string;
}

interface HostState {
  steps: Step[];
  /** Each tools/call the app made, in order, with its answer once it came. */
  appCalls: AppCall[];
  /** notifications/tools/list_changed received before the app was connected. */
  listChanged: number;
  /** The first failure, with its stack; the test fails on it. */
  error: string | null;
}

type Tool = Awaited<ReturnType<Client["listTools"]>>["tools"][number];
type Result = {
  content?: { type: string; text?: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
};

const state: HostState = { steps: [], appCalls: [], listChanged: 0, error: null };
(window as unknown as { host: HostState }).host = state;
const started = performance.now();
const since = (): number => Math.round(performance.now() - started);

function show(line: string): void {
  const log = document.getElementById("log");
  if (log) log.textContent += `${line}\n`;
}

function record(step: string, seen: Record<string, unknown> = {}): void {
  state.steps.push({ step, ms: since(), ...seen });
  show(`${since()} ms ${step} ${JSON.stringify(seen).slice(0, 300)}`);
}

function fail(error: unknown): void {
  const text = error instanceof Error ? `${error.message}\n${error.stack ?? ""}` : String(error);
  state.error ??= text;
  show(`error: ${text}`);
}

function summary(result: Result): Record<string, unknown> {
  const text = (result.content ?? [])
    .filter((block) => block.type === "text")
    .map((block) => block.text ?? "")
    .join("\n");
  return {
    isError: result.isError ?? false,
    text: text.slice(0, 500),
    structured: result.structuredContent ? Object.keys(result.structuredContent) : [],
  };
}

function uiUri(tool: Partial<Tool>): string | undefined {
  try {
    return getToolUiResourceUri(tool);
  } catch {
    return undefined; // a resourceUri that is not ui://: no UI a host may render
  }
}

function uiTools(tools: Tool[]): string[] {
  return tools.filter((tool) => uiUri(tool) !== undefined).map((tool) => tool.name);
}

function named(tool: { name: string }, wanted: string): boolean {
  return tool.name === wanted || tool.name.endsWith(`__${wanted}`);
}

/** The tool a model would be offered and a host can render: listed, with a UI, not app-only. */
function pick(tools: Tool[], wanted: string): Tool | undefined {
  return tools.find((tool) => named(tool, wanted) && uiUri(tool) !== undefined && !isToolVisibilityAppOnly(tool));
}

async function search(client: Client, tools: Tool[], query: string): Promise<Tool[]> {
  const finder = tools.find((tool) => tool.name.endsWith("find_tools"));
  if (finder === undefined) return tools;
  const answer = (await client.callTool({ name: finder.name, arguments: { query } })) as Result;
  const found = (answer.structuredContent?.tools ?? []) as { name: string; _meta?: Record<string, unknown> }[];
  record("searched", {
    tool: finder.name,
    query,
    found: found.map((tool) => tool.name),
    foundWithUi: found.filter((tool) => uiUri(tool) !== undefined).map((tool) => tool.name),
    ...summary(answer),
  });
  const relisted = (await client.listTools(undefined, { cacheMode: "refresh" })).tools;
  record("relisted", { tools: relisted.map((tool) => tool.name), ui: uiTools(relisted), listChanged: state.listChanged });
  return relisted;
}

async function main(): Promise<void> {
  const params = new URLSearchParams(location.search);
  const gateway = params.get("gateway");
  const wanted = params.get("tool");
  if (!gateway || !wanted) throw new Error("host.html?gateway=URL&tool=NAME[&query=TEXT][&arguments=JSON]");
  const query = params.get("query") ?? wanted;
  const args = JSON.parse(params.get("arguments") ?? "{}") as Record<string, unknown>;

  const client = new Client(HOST, {
    capabilities: { extensions: { [UI_EXTENSION]: { mimeTypes: [APP_MIME_TYPE] } } },
  });
  client.setNotificationHandler("notifications/tools/list_changed", () => {
    state.listChanged += 1;
  });
  const transport = new StreamableHTTPClientTransport(new URL(gateway));
  await client.connect(transport);
  record("connected", {
    server: client.getServerVersion()?.name,
    protocolVersion: (transport as unknown as { protocolVersion?: string }).protocolVersion,
    sessionId: transport.sessionId !== undefined,
  });

  let tools = (await client.listTools()).tools;
  record("listed", { tools: tools.map((tool) => tool.name), ui: uiTools(tools) });
  // In search mode the model is told to search first, and what it finds joins the listing.
  tools = await search(client, tools, query);
  const tool = pick(tools, wanted);
  if (tool === undefined) {
    const same = tools.find((listed) => named(listed, wanted));
    const why = same ? `listed as ${same.name} with _meta ${JSON.stringify(same._meta)}` : "not listed";
    throw new Error(`no UI tool ${wanted}: ${why}; listed ${tools.map((listed) => listed.name).join(", ")}`);
  }
  const uri = uiUri(tool) as string;
  record("picked", { tool: tool.name, resourceUri: uri, meta: tool._meta });

  const result = (await client.callTool({ name: tool.name, arguments: args })) as Result;
  record("called", { tool: tool.name, ...summary(result) });

  const read = await client.readResource({ uri });
  const content = read.contents[0] as { uri: string; mimeType?: string; text?: string; blob?: string };
  const html = content.text ?? (content.blob !== undefined ? atob(content.blob) : "");
  record("read", { uri: content.uri, mimeType: content.mimeType, chars: html.length, contents: read.contents.length });
  if (content.mimeType !== APP_MIME_TYPE || !html) throw new Error(`${uri} is not an app: ${content.mimeType}`);

  const iframe = document.createElement("iframe");
  iframe.id = "app";
  iframe.setAttribute("sandbox", "allow-scripts"); // an opaque origin: no reach into this page
  document.getElementById("frame")?.append(iframe);
  const view = iframe.contentWindow;
  if (view === null) throw new Error("the iframe has no window");

  const bridge = new AppBridge(
    client,
    HOST,
    { openLinks: {}, serverTools: {}, serverResources: {}, logging: {} },
    { hostContext: { theme: "light", displayMode: "inline", platform: "web" } },
  );
  bridge.onsizechange = ({ height }) => {
    if (height) iframe.style.height = `${height}px`;
  };
  bridge.oninitialized = () => {
    record("initialized", { app: bridge.getAppVersion() });
    bridge
      .sendToolInput({ arguments: args })
      .then(() => bridge.sendToolResult(result as Parameters<AppBridge["sendToolResult"]>[0]))
      .then(() => record("result-sent"))
      .catch(fail);
  };
  await bridge.connect(new PostMessageTransport(view, view));
  // As connect() forwards an app's tools/call to the client, and recorded.
  bridge.oncalltool = async (call, extra) => {
    const made: AppCall = { name: call.name, arguments: call.arguments, ms: since() };
    state.appCalls.push(made);
    try {
      const answer = await client.request({ method: "tools/call", params: call }, { signal: extra.mcpReq.signal });
      Object.assign(made, { answeredMs: since(), ...summary(answer as Result) });
      return answer as Awaited<ReturnType<NonNullable<typeof bridge.oncalltool>>>;
    } catch (error) {
      Object.assign(made, { answeredMs: since(), error: String(error) });
      throw error;
    }
  };
  iframe.srcdoc = html;
  record("rendered", { sandbox: iframe.getAttribute("sandbox") });
}

window.addEventListener("error", (event) => fail(event.error ?? event.message));
window.addEventListener("unhandledrejection", (event) => fail(event.reason));
main().catch(fail);
