import type { ComponentChildren } from "preact";

/**
 * A drawing of the console (the sub-agent tree, an exchange): an SVG image of the given size, named for
 * screen readers by `label`, scrolled sideways on a screen narrower than it (console.css `.picture`).
 */
export function Picture(props: {
  kind: string;
  width: number;
  height: number;
  label: string;
  testId: string;
  children: ComponentChildren;
}) {
  return (
    <div class="picture">
      <svg
        class={props.kind}
        width={props.width}
        height={props.height}
        viewBox={`0 0 ${props.width} ${props.height}`}
        role="img"
        aria-label={props.label}
        data-testid={props.testId}
      >
        {props.children}
      </svg>
    </div>
  );
}
