// The error a bad flag or environment variable raises: the CLI prints its message and exits 2.
export class ConfigError extends Error {}
