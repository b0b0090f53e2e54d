// winston JSON logs; child loggers carry context (cube, replica set, partition, reassign id).
import winston from 'winston';

export type Logger = winston.Logger;

export function createLogger(
  component: string,
  level = process.env.STREAMCUBE_LOG_LEVEL ?? 'info',
): Logger {
  return winston.createLogger({
    level,
    defaultMeta: { component },
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format.errors({ stack: true }),
      winston.format.json(),
    ),
    transports: [
      new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug'] }),
    ],
  });
}
