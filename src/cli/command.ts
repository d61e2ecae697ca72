// What a `sabre` subcommand is: a name, a line for `sabre --help`, its own --help text, and a
// run function from its argv to an exit status (0 clean, 1 errors seen, 2 usage).

export interface Io {
  /** One line of the command's output (stdout). */
  out(line: string): void;
  /** Whether stderr is a terminal: progress lines go there only then. */
  readonly tty: boolean;
}

export interface Command {
  readonly name: string;
  /** One line (or two) for the table in `sabre --help`. */
  readonly summary: string;
  /** The full text of `sabre NAME --help`. */
  help(): string;
  run(argv: string[], io: Io): Promise<number>;
}
