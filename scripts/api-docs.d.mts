export function render(doc: unknown): string;
export function formatted(md: string): string;
export function fetchOpenApi(): Promise<unknown>;
