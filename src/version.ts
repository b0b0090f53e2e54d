// streamcube's release, as `--version` prints it and `streamcube_build_info` reports it; kept equal
// to package.json's version by a unit test.
export const version = '0.1.0';
