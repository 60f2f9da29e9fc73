/**
 * The parameters of the i-th recorded tool call, shared by the scenarios and their
 * child processes (no imports: a child runs the built packages, not core's sources).
 */
export const toolParams = (i: number) => ({
  tool_name: i % 3 === 0 ? "read_file" : i % 3 === 1 ? "write_file" : "search",
  server_id: "srv-1",
  agent_id: "agent-1",
  bytes_read: (i * 7919) % 100000,
  bytes_written: (i * 104729) % 50000,
  delegation_depth: i % 4,
  allowed: true
})
