// The `helm test` pod's script (templates/tests/readiness.yaml): GET each URL of
// STREAMCUBE_READYZ_URLS; every one must answer 200 within 10 s. Prints one line per URL.
/* global process, fetch, AbortSignal, console */
let failed = 0;
for (const url of (process.env.STREAMCUBE_READYZ_URLS ?? '').split(' ').filter(Boolean)) {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    console.log(`${url}: ${response.status} ${(await response.text()).trim()}`);
    if (response.status !== 200) failed++;
  } catch (error) {
    console.log(`${url}: ${error.cause?.code ?? error.cause?.message ?? error.message}`);
    failed++;
  }
}
process.exit(failed === 0 ? 0 : 1);
