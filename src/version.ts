/** The library version; also names the Lua scripts' registry (`<name>@<version>`). Kept equal to package.json by a test. */
export const VERSION = '0.1.0';
