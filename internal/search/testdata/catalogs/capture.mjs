// capture.mjs lists the tools of real MCP servers over stdio and writes
// each server's tool definitions to <name>.json beside this file. It is
// run by hand, once, never by the tests: see README.md here.
//
//   mkdir /tmp/cat && cd /tmp/cat && npm install --ignore-scripts \
//     @modelcontextprotocol/sdk@1.32.2 <the servers in README.md>
//   node capture.mjs /tmp/cat/node_modules [server...]
//
// Only initialize and tools/list are sent, so the dummy credentials
// below are never used: the servers need them only to start.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const modules = process.argv[2];
const sdk = (p) => import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const here = dirname(fileURLToPath(import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "capture-"));

// name: [package, extra args, env]
const servers = {
  everything: ["@modelcontextprotocol/server-everything", ["stdio"], {}],
  filesystem: ["@modelcontextprotocol/server-filesystem", [scratch], {}],
  memory: ["@modelcontextprotocol/server-memory", [], { MEMORY_FILE_PATH: join(scratch, "memory.json") }],
  "sequential-thinking": ["@modelcontextprotocol/server-sequential-thinking", [], {}],
  github: ["@modelcontextprotocol/server-github", [], { GITHUB_PERSONAL_ACCESS_TOKEN: "dummy" }],
  gitlab: ["@modelcontextprotocol/server-gitlab", [], { GITLAB_PERSONAL_ACCESS_TOKEN: "dummy" }],
  slack: ["@modelcontextprotocol/server-slack", [], { SLACK_BOT_TOKEN: "dummy", SLACK_TEAM_ID: "T0" }],
  postgres: ["@modelcontextprotocol/server-postgres", ["postgresql://127.0.0.1:1/none"], {}],
  "brave-search": ["@modelcontextprotocol/server-brave-search", [], { BRAVE_API_KEY: "dummy" }],
  "google-maps": ["@modelcontextprotocol/server-google-maps", [], { GOOGLE_MAPS_API_KEY: "dummy" }],
  redis: ["@modelcontextprotocol/server-redis", ["redis://127.0.0.1:1"], {}],
  everart: ["@modelcontextprotocol/server-everart", [], { EVERART_API_KEY: "dummy" }],
  "aws-kb-retrieval": ["@modelcontextprotocol/server-aws-kb-retrieval", [], { AWS_ACCESS_KEY_ID: "dummy", AWS_SECRET_ACCESS_KEY: "dummy", AWS_REGION: "us-east-1" }],
  puppeteer: ["@modelcontextprotocol/server-puppeteer", [], {}],
  gdrive: ["@modelcontextprotocol/server-gdrive", [], {}],
  notion: ["@notionhq/notion-mcp-server", [], { NOTION_TOKEN: "dummy" }],
  firecrawl: ["firecrawl-mcp", [], { FIRECRAWL_API_KEY: "dummy" }],
  playwright: ["@playwright/mcp", [], {}],
  context7: ["@upstash/context7-mcp", [], {}],
  tavily: ["tavily-mcp", [], { TAVILY_API_KEY: "dummy" }],
  exa: ["exa-mcp-server", [], { EXA_API_KEY: "dummy" }],
  kubernetes: ["mcp-server-kubernetes", [], {}],
};

const only = process.argv.slice(3);
for (const [name, [pkg, args, env]] of Object.entries(servers)) {
  if (only.length && !only.includes(name)) continue;
  const meta = JSON.parse(readFileSync(join(modules, pkg, "package.json"), "utf8"));
  const bin = typeof meta.bin === "string" ? meta.bin : Object.values(meta.bin)[0];
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(modules, pkg, bin), ...args],
    env: { PATH: process.env.PATH, HOME: scratch, ...env },
    stderr: "ignore",
  });
  const client = new Client({ name: "capture", version: "0" });
  try {
    await client.connect(transport, { timeout: 20000 });
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, { timeout: 20000 });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    const out = {
      server: name,
      package: pkg,
      version: meta.version,
      tools: tools.map(({ name, title, description, inputSchema, annotations }) => ({ name, title, description, inputSchema, annotations })),
    };
    writeFileSync(join(here, name + ".json"), JSON.stringify(out, null, 1) + "\n");
    console.log(`${name}\t${pkg}@${meta.version}\t${tools.length} tools`);
  } catch (err) {
    console.log(`${name}\t${pkg}@${meta.version}\tFAILED: ${err.message}`);
  } finally {
    await client.close().catch(() => {});
  }
}
