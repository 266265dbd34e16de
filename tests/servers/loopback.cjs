// Preload for node servers under test (`node --require tests/servers/loopback.cjs SERVER ...`):
// every TCP server binds to 127.0.0.1 only, whatever host it asked for, and once listening
// writes "PATCHBAY_TEST_LISTENING <port>" to stderr, so a test can pass PORT=0 and learn
// the port the system chose (no race for a "free" port).
"use strict";
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function patchedListen(...args) {
  if (args.length > 0 && args[0] !== null && typeof args[0] === "object") {
    args[0] = { ...args[0], host: "127.0.0.1" };
  } else if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const rest = args.slice(1).filter((a) => typeof a !== "string"); // drop any host given
    args = [port, "127.0.0.1", ...rest];
  }
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") {
      process.stderr.write(`PATCHBAY_TEST_LISTENING ${address.port}\n`);
    }
  });
  return listen.apply(this, args);
};
