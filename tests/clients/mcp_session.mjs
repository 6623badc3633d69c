// A core MCP session with the official TypeScript SDK client (npm @modelcontextprotocol/sdk), driven by
// tests/integration/test_mcp_typescript_live.py: list, read, call, subscribe. Prints one JSON summary line.
// Usage: node mcp_session.mjs <mcp URL> <service name> <replicas to scale to>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, serviceName, replicas] = process.argv.slice(2);
const summary = { steps: [] };
const step = (name, value) => { summary.steps.push(name); summary[name] = value; };

const client = new Client({ name: "shoal-ts-test", version: "1.0.0" });
const updates = [];
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (note) => {
  updates.push({ uri: note.params.uri, at: Date.now() });
});
const transport = new StreamableHTTPClientTransport(new URL(url));
const deadline = setTimeout(() => { console.log(JSON.stringify({ ...summary, error: "timeout" })); process.exit(3); },
  60000);
try {
  await client.connect(transport);
  step("protocolVersion", transport.protocolVersion ?? null);
  step("sessionId", transport.sessionId ?? null);
  step("tools", (await client.listTools()).tools.map((t) => t.name).sort());
  step("resources", (await client.listResources()).resources.map((r) => r.uri).sort());
  step("templates", (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate).sort());
  const cluster = await client.readResource({ uri: "service://cluster" });
  step("clusterMime", cluster.contents[0].mimeType);
  const detail = await client.readResource({ uri: `service://services/${serviceName}` });
  const service = JSON.parse(detail.contents[0].text);
  step("serviceId", service.service?.ID ?? null);
  const found = await client.callTool({ name: "search", arguments: { query: serviceName } });
  step("searchIsError", Boolean(found.isError));
  step("searchText", found.content[0].text.includes(serviceName));
  const uri = `service://services/${service.service.ID}`;
  await client.subscribeResource({ uri });
  const calledAt = Date.now();
  const scaled = await client.callTool({ name: "scale_service", arguments: { id: service.service.ID, replicas: Number(replicas) } });
  step("scaleIsError", Boolean(scaled.isError));
  step("scaleText", scaled.content[0].text.slice(0, 300));
  const until = Date.now() + 5000;
  while (!updates.some((u) => u.uri === uri) && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const first = updates.find((u) => u.uri === uri);
  step("updatedAfterMs", first ? first.at - calledAt : null);
  const hidden = await client.readResource({ uri: "service://services/no-such-service-here" }).then(
    () => "read", (error) => String(error.code ?? error.message));
  step("missingRead", hidden);
  await client.unsubscribeResource({ uri });
  await transport.terminateSession();
  await client.close();
} catch (error) {
  summary.error = String(error && error.stack ? error.stack : error);
}
clearTimeout(deadline);
console.log(JSON.stringify(summary));
process.exit(summary.error ? 2 : 0);
