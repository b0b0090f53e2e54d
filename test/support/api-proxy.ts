// A TCP proxy in front of the test API server that can hold back what clients send: one process's
// view of the API server going silent (a partition), while every other client talks to it as
// before. TLS passes through untouched (the server's certificate names 127.0.0.1).
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { join } from 'node:path';
import { tempDir } from './scratch-dirs.ts';

export class PausableApiProxy {
  private server: Server | undefined;
  private readonly clients = new Set<Socket>();
  private paused = false;
  /** A kubeconfig like the environment's, whose server is this proxy. */
  kubeconfig = '';

  /** Listens on a free loopback port in front of `kubeconfig`'s server, and writes its own. */
  async start(kubeconfig: string): Promise<void> {
    const text = readFileSync(kubeconfig, 'utf8');
    const match = /server: https:\/\/(127\.0\.0\.1):(\d+)/.exec(text);
    if (!match) throw new Error(`${kubeconfig}: no https://127.0.0.1:<port> server`);
    const [, host, port] = match;
    const server = createServer((client) => {
      this.clients.add(client);
      if (this.paused) client.pause();
      const upstream = connect(Number(port), host);
      client.pipe(upstream);
      upstream.pipe(client);
      const close = (): void => {
        this.clients.delete(client);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    this.server = server;
    const own = (server.address() as { port: number }).port;
    this.kubeconfig = join(tempDir('api-proxy'), 'kubeconfig');
    writeFileSync(this.kubeconfig, text.replace(match[0], `server: https://${host}:${own}`));
  }

  /** Forwards nothing more that clients send (answers to what was forwarded still come back). */
  pause(): void {
    this.paused = true;
    for (const c of this.clients) c.pause();
  }

  resume(): void {
    this.paused = false;
    for (const c of this.clients) c.resume();
  }

  async close(): Promise<void> {
    for (const c of this.clients) c.destroy();
    if (this.server) await new Promise((resolve) => this.server!.close(resolve));
  }
}
