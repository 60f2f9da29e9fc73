/**
 * The workspace's test projects: one Vitest project per package, each with its
 * own `vitest.config.ts`. Vitest 5 no longer reads this file by itself, so
 * `vitest.config.ts` imports the list from here.
 */
export default ["packages/*"]
