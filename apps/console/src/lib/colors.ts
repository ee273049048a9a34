/** Stable colours: a hue per role (and the trainer), a lightness step per model of the role, so the same
 * role/model has the same colour on every page and in every screenshot. */
export const ROLE_HUES: Readonly<Record<string, number>> = {
  rollout: 217,
  genrm: 32,
  teacher: 268,
  train: 152,
};

const LIGHTNESS_STEPS = [46, 34, 58, 28, 64];

export function roleColor(role: string, modelIndex = 0, alpha = 1): string {
  const hue = ROLE_HUES[role] ?? 0;
  const saturation = role in ROLE_HUES ? 72 : 0;
  const lightness = LIGHTNESS_STEPS[modelIndex % LIGHTNESS_STEPS.length] ?? 46;
  return `hsl(${hue} ${saturation}% ${lightness}%${alpha < 1 ? ` / ${alpha}` : ''})`;
}

/** Index of each model within its role, in first-seen order, for `roleColor`. */
export function modelIndexer(): (role: string, model: string | null) => number {
  const seen = new Map<string, string[]>();
  return (role, model) => {
    if (model === null) return 0;
    const list = seen.get(role) ?? [];
    if (!seen.has(role)) seen.set(role, list);
    let i = list.indexOf(model);
    if (i < 0) {
      list.push(model);
      i = list.length - 1;
    }
    return i;
  };
}
