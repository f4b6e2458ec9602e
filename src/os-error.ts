/**
 * Node's file-system errors (EACCES, ENOTDIR, EISDIR, ENOSPC, EROFS, ...) in words a user can act on. Node's own
 * text ("ENOTDIR: not a directory, mkdir '/x/y'") names a syscall, not what is wrong with the path; every message
 * agentrl prints about an OS error goes through here.
 */

const REASONS: Record<string, string> = {
  ENOENT: "no such file",
  EACCES: "permission denied",
  EPERM: "permission denied",
  ENOTDIR: "a part of the path is not a folder",
  EISDIR: "is a folder",
  EEXIST: "already exists",
  ENOSPC: "no space left on the device",
  EDQUOT: "disk quota exceeded",
  EROFS: "read-only file system",
  ENAMETOOLONG: "the name is too long",
  ELOOP: "too many levels of symbolic links",
  EMFILE: "too many open files",
  ENFILE: "too many open files",
  EIO: "input/output error",
  EBUSY: "busy",
};

/** What a syscall was trying to do, for "cannot <verb>". */
const VERBS: Record<string, string> = {
  open: "open it",
  read: "read it",
  write: "write it",
  mkdir: "create the folder",
  rmdir: "remove the folder",
  rm: "remove it",
  unlink: "remove it",
  rename: "rename it",
  scandir: "list the folder",
  stat: "look it up",
  lstat: "look it up",
  access: "access it",
  copyfile: "copy it",
  fsync: "write it",
};

/** A Node file-system error: it has an errno code and the path it was about. */
export interface FsError extends NodeJS.ErrnoException {
  code: string;
  path: string;
}

export function isFsError(err: unknown): err is FsError {
  if (!(err instanceof Error)) return false;
  const e = err as NodeJS.ErrnoException;
  return typeof e.code === "string" && typeof e.path === "string" && typeof e.syscall === "string";
}

/** The reason in words ("permission denied", "a part of the path is not a folder", ...), or undefined if unknown. */
export function osErrorReason(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === undefined ? undefined : REASONS[code];
}

/**
 * One line for a file-system error no command translated itself: "PATH: cannot create the folder: read-only file
 * system". The CLI prints it instead of Node's text (the exit code stays 1: where it happened is not known here).
 */
export function describeFsError(err: FsError): string {
  const verb = VERBS[err.syscall ?? ""];
  const reason = osErrorReason(err) ?? err.code;
  return `${err.path}: ${verb ? `cannot ${verb}: ` : ""}${reason}`;
}
